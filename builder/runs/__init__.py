"""A run as the store holds it, read and written by one set of rules for the command line
(`builder.commands`), the web console (`builder.ui`) and `serve` (`builder.serve`): its start
record (`start_record`), its execution history as one document (`history`), the path it took
through its state machine (`path`), the folder it loads (`folders`), and its stop (`stop`)."""
