"""ppdm.parties"""
