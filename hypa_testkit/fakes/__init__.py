"""Local fakes of the services hypa talks to, speaking their wire protocols on 127.0.0.1 for the real
client libraries (one module per service; local_http.py is what the HTTP ones share)."""
