"""One instance of the gateway: a supervisor and its worker processes on shared ports."""
