"""One Router per resource group: estimates, runs, catalog."""
