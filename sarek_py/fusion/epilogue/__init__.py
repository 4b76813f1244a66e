"""Epilogue fusion: kernels, launches, launch sequences; legality and launch conditions.

Modules, lowest first; each imports only those above it in this list
(tests/test_epilogue_layers.py), on the launch record of :mod:`sarek_py.ir.host.launch`:
``well_formed`` and ``user_names`` (checked kernels, the user's names in refusals),
``accesses`` (array accesses of kernel code), ``buffers`` (which buffer an argument
names), ``consumer`` (the element-wise consumer, the window check), ``legality``
(Index_slice and Launch_window on two launches), ``conditions`` (the launch conditions
checked at every launch), ``fuse_kernels`` (the rewrite), ``sequence`` (``fuse_launches``).
"""
