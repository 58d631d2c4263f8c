"""draft-wang-ppm-differential-privacy: mechanisms, calibration, accounting, policies."""
