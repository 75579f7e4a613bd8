  // TODO(__op__): the op's arguments after a and b (int[2] stride, SymInt[2] size, float, bool), in both schemas
  // and in each signature that passes them on.
  m.def("__op__(Tensor a, Tensor b) -> Tensor", pt2);
  m.def("__op___backward(Tensor grad_out, Tensor a, Tensor b, bool[2] output_mask) -> (Tensor, Tensor)", pt2);
