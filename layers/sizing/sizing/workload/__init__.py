"""The workload: a team's business description of it (`sizing.workload.spec`), its presets and loading
(`sizing.workload.parse`), and what the estimator needs from it (`sizing.workload.derived`). Nothing is imported
here: each module is imported by its own name."""
