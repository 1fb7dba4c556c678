"""Attachments made into content for the model: images (Pillow), documents (pypdf), voice."""
