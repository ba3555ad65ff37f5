"""Where the platform's services are deployed and how to reach them: facts that the code starting them and the
code calling them both read, below both."""
