"""Pieces the decompositions share."""

from __future__ import annotations

from ..pointwise import opmath

__all__ = ["opmath"]
