"""Asynchronous inference: SageMaker's InvokeEndpointAsync, queued in the state folder and run on the endpoint's
copies (`queue.py`, `accepted.py`, `dispatcher.py`, `notification.py`); the gateway's route: `gateway/async_route.py`.
"""
