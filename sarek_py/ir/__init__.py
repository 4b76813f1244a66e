"""The typed kernel IR: types, nodes, traversal, text form, checker, interpreter."""
