"""The Contacts app's own use cases (the contact list) and its request and response models."""
