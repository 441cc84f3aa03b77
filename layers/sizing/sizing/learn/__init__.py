"""The learning loop: every real measurement improves the next estimate (docs/learning.md).

- `levels`: each measured load level of a run against a real endpoint is an item of the table (twin levels are
  stored apart and never calibrate anything); queryable by hardware family and model.
- `correction`: the refit -- a small per-(family, engine, model) correction on top of the shipped reference
  profile (two time scales), cross-validated on the team's rows and on the reference rows, with the adoption gate.
- `profiles`: versioned correction profiles in S3 with their cross-validation tables; the adopted pointer is
  written conditionally, so two refits at once adopt at most one; estimators load the newest adopted version,
  cached per container and checked by ETag.
- `refit`: the job (the calibration function on `SizingRunCompleted`, or in-process on the embedded default).
- `matching`: a configuration that was measured is answered from its measurement (`basis: measured`).
- `drift`: a measurement outside its prediction's stated interval is flagged.

Module-level imports here stay cheap: nothing below imports boto3 or the simulator until it is used.
"""
