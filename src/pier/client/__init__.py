"""What the `pier` CLI uses to talk to a running gateway: an HTTP client over the SageMaker API, and deploy files."""
