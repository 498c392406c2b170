"""Autoscaling: Application Auto Scaling and the CloudWatch side of it, served by the gateway (docs/autoscaling.md)."""
