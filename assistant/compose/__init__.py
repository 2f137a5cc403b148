"""Composition: turning a rule hit, evidence and passages into the Diagnosis users see."""
