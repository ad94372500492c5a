"""`xlp finetune`: the stage entry; the tasks themselves are in `xlp_cli/tasks/`."""
