"""ppdm.mining"""
