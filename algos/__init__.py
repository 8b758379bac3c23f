"""textgym.algos"""
