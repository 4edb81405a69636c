"""Scheduled turns: the schedule arithmetic (:mod:`core.schedule.times`) and the scheduler
that claims each occurrence once in the store (:mod:`core.schedule.scheduler`)."""
