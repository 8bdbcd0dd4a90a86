"""Use cases: what the Lambda functions and the local runtime do, over the store, launcher and bus ports."""
