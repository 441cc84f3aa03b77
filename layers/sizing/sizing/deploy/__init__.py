"""Provisioning: turn a chosen architecture into what runs it, apply it, and remove it safely.

- `architecture.DeployTarget`: what a provisioner deploys of one architecture (read from the typed answer, its
  JSON or a bare id), completed from the catalog.
- `manifests.render(architecture, run_id, candidate_id, options) -> list[dict]` and `to_yaml(objs)`: Karpenter
  NodePool + EC2NodeClass and the vLLM Deployment, Service, PodDisruptionBudget, HorizontalPodAutoscaler.
- `validate.problems(objs)` / `validate.validate(objs)`: offline checks against the CRDs and Kubernetes 1.31-1.34.
- Provisioners (`base.Provisioner`: apply → `Endpoint`, ready, teardown): `eks.EksProvisioner`,
  `sagemaker.SageMakerProvisioner`, `local.LocalTwinProvisioner`, `base.ExistingEndpoint`.
- `janitor.sweep(...)`: removes what finished or expired runs left behind.
- `labels`: the one label/tag vocabulary (`sizing.llm/run-id`, `sizing.llm/candidate-id`, ...) all of them use.

Import each part from its module: the package imports nothing, so a function that needs only the labels or the
janitor does not load the renderer, the catalog and the planner behind it."""
