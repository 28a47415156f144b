"""ppdm.hiding"""
