"""The measuring half of the product: the Step Functions sizing run's steps, the load-test task, and the same run
on the embedded default (moto's Step Functions engine executing the same ASL, handlers dispatched in-process)."""
