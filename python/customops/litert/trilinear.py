"""trilinear_interpolation in ATen operations: the formula the Inductor decomposition already writes."""

from ..inductor.trilinear import trilinear_interpolation

DECOMPOSITIONS = {"trilinear_interpolation": trilinear_interpolation}
