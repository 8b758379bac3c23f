"""textgym.wrappers"""
