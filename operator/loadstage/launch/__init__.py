"""What both backends launch and watch in the same way: every container's and local process's command line
(argv), and spec.injectors.onLost (lost_injectors). Below the backends, above the engine."""
