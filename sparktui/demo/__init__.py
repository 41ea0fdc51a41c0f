"""The sparktui demo engine: a stand-in for an SGLang or vLLM rank, standard library only, a
package copied alone into the test image (the program: ``engine.py``)."""
