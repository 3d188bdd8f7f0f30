"""What runs inside a target for the WSGI servers that have no command line of their own."""
