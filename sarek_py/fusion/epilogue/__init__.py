"""Epilogue fusion: kernels, launches, launch sequences; legality and launch conditions."""
