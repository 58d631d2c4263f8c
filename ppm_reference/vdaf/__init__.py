"""draft-irtf-cfrg-vdaf: fields, XOFs, FLP and Prio3."""
