"""Directives (issue 18, item 2): organizer broadcasts every agent must acknowledge."""
