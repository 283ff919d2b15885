"""The conversation as plain data: the tree of messages and versions, its file format, fitting a
request into the model's context, and the exports (Markdown, JSON) both front ends write."""
