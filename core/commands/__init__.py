"""The headless commands: ``export`` (JSON/CSV of steps, samples and metrics) and ``report`` (the run's health,
with the exit status cron reads). Their output is the contract of docs/cli.md: keys are added, never renamed.
"""
