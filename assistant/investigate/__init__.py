"""`torchhelp run --investigate`: re-run the failing program once per experiment, one change each, and
let what happened verify or rule out the diagnosis's hypotheses.

The child side (:mod:`.switches`) is imported by the crash hook inside the user's process, so this
package's top level stays empty: no import here may pull in the engine.
"""
