"""SELECT's protocol (prompt templates, refusal rule, constants) read from the user's release clone."""
