"""draft-ietf-ppm-dap: wire messages, HPKE, tasks, protocol core, storage and servers."""
