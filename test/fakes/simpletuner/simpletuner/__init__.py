# The stand-in's package (test/fakes/simpletuner/simpletuner/train.py): what the runner's probe
# imports to find train.py and its version, as it does with the real package.
__version__ = "4.8.0"
