"""What the app knows and what may be asked of it: the run model, the watcher's messages, and the
:class:`~miles_tui.tui.model.monitor_app.MonitorApp` protocol screens and widgets type against."""
