"""ppm-reference: the Python reference implementation of the IETF Privacy Preserving
Measurement stack, as one namespace (so that no generic top-level name such as ``dap``,
``interop`` or ``analytics`` clashes with another distribution's):

    ppm_reference.vdaf        draft-irtf-cfrg-vdaf
    ppm_reference.dp_policy   draft-wang-ppm-differential-privacy
    ppm_reference.dap         draft-ietf-ppm-dap
    ppm_reference.interop     the interop test API, its runner, the peers, conformance
    ppm_reference.analytics   the systems of the seed papers
    ppm_reference.cli         the `ppm` command line

Nothing is imported here: the layers (cli > analytics > interop > dap > dp_policy > vdaf)
import downward only, checked by import-linter.
"""
