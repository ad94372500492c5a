"""`xlp finetune --task unmt`: unsupervised translation between two languages from monolingual data only
(denoising auto-encoding + on-the-fly back-translation + MLM, XLM / MASS / the VLE paper). docs/unmt.md."""
