  // TODO(__op__): the op's arguments after x (int window, int[2] kernel_size, SymInt[2] size, float, bool), in both
  // schemas and in each signature that passes them on.
  m.def("__op__(Tensor x) -> Tensor", pt2);
  m.def("__op___backward(Tensor grad_out, Tensor x) -> Tensor", pt2);
