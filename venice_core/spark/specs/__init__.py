"""What passes between the control plane, a job's driver and its executors: the task specs a job hands its executors
(`task_specs`: frozen, picklable) and what a job reports in its result file (`job_result`). Imports nothing heavy:
each Python worker imports `task_specs`."""
