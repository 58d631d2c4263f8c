"""The DAP interop test API (draft-dcook-ppm-dap-interop-test-design)."""
