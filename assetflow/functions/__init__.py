"""Lambda handlers: thin adapters from AWS events to assetflow's use cases."""
