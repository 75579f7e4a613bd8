"""quick_gelu in ATen operations: the formula the Inductor decomposition already writes."""

from ..inductor.quick_gelu import quick_gelu

DECOMPOSITIONS = {"quick_gelu": quick_gelu}
