"""textgym.envs"""
