"""gradflow_ref: the reference implementation behind the Gradient Flow guide.

One module per technique, torch and the standard library only. Each module is
taught by the chapter of the same name in docs/ and tested against torch in
tests/test_<module>.py.
"""

__version__ = "0.1.0"
