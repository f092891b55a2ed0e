"""ybscale: designed scalability experiments on distributed SQL databases."""

__version__ = "0.1.0"
