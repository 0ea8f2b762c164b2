"""Callbacks for training frameworks: ``vramfit.integrations.transformers.VramfitCallback``
(a ``transformers.TrainerCallback``) and ``vramfit.integrations.lightning.VramfitCallback``
(a Lightning ``Callback``). Each module imports its framework when imported."""
